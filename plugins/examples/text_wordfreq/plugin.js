// text.wordfreq: a pure plugin (no internal API). Words are runs of letters, digits and
// apostrophes in any script, lowercased; ties are broken alphabetically.
function invoke(args, context) {
  const top = args.top || 10;
  const minLength = args.min_length || 1;
  const counts = new Map();
  let total = 0;
  for (const match of args.text.toLowerCase().matchAll(/[\p{L}\p{N}']+/gu)) {
    const word = match[0].replace(/^'+|'+$/g, "");
    if ([...word].length < minLength) continue;
    total += 1;
    counts.set(word, (counts.get(word) || 0) + 1);
  }
  const words = [...counts.entries()]
    .sort((a, b) => b[1] - a[1] || (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0))
    .slice(0, top)
    .map(([word, count]) => ({ word, count }));
  return { words, total, distinct: counts.size };
}
