// A line diff of two texts (longest common subsequence), for a pinned and a changed definition
// side by side. It returns line strings with a mark; the page puts each line in as text.

const MAX_LINES = 1500; // per side; past it the cells (n·m) cost too much: no highlight

// -> { left: [{text, mark}], right: [{text, mark}] }, mark "same" | "del" | "add";
//    `bounded: false` when the texts were too long to compare (every line is then "same").
export function lineDiff(oldText, newText) {
  const a = String(oldText).split("\n");
  const b = String(newText).split("\n");
  if (a.length > MAX_LINES || b.length > MAX_LINES) {
    return { bounded: false, left: a.map((text) => ({ text, mark: "same" })),
      right: b.map((text) => ({ text, mark: "same" })) };
  }
  // lengths[i][j]: the longest common subsequence of a[i..] and b[j..], in one flat array.
  const w = b.length + 1;
  const lengths = new Uint16Array((a.length + 1) * w);
  for (let i = a.length - 1; i >= 0; i -= 1) {
    for (let j = b.length - 1; j >= 0; j -= 1) {
      lengths[i * w + j] = a[i] === b[j]
        ? lengths[(i + 1) * w + j + 1] + 1
        : Math.max(lengths[(i + 1) * w + j], lengths[i * w + j + 1]);
    }
  }
  const left = [];
  const right = [];
  let i = 0;
  let j = 0;
  while (i < a.length || j < b.length) {
    if (i < a.length && j < b.length && a[i] === b[j]) {
      left.push({ text: a[i], mark: "same" });
      right.push({ text: b[j], mark: "same" });
      i += 1;
      j += 1;
    } else if (j < b.length && (i >= a.length || lengths[i * w + j + 1] >= lengths[(i + 1) * w + j])) {
      right.push({ text: b[j], mark: "add" });
      j += 1;
    } else {
      left.push({ text: a[i], mark: "del" });
      i += 1;
    }
  }
  return { bounded: true, left, right };
}
