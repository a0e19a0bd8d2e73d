"""`toolproxy plugins ...` against a running proxy and plugin host (run as subprocesses)."""

from __future__ import annotations

from tests.support.calls import invoke
from tests.support.plugin_harness import (  # noqa: F401  (fixtures)
    EXAMPLES,
    grant,
    pclient,
    plugin_db,
    plugin_host,
    wait_serving,
)
from tests.support.cli_command import cli


async def test_install_list_enable_disable_remove(pclient, token, team) -> None:
    url = str(pclient.make_url("")).rstrip("/")
    code, out, err = await cli("plugins", "install", str(EXAMPLES / "text_wordfreq"), "--url", url)
    assert code == 0, err
    assert out.startswith("installed text.wordfreq 1.0.0 (sha256 ")
    code, out, _ = await cli("plugins", "install", str(EXAMPLES / "text_wordfreq"), "--url", url)
    assert code == 0 and out.startswith("already installed")
    code, out, _ = await cli("plugins", "list", "--url", url)
    assert code == 0 and "text.wordfreq" in out and "installed" in out and "A/read" in out
    code, out, err = await cli("plugins", "enable", "text.nosuch", "--url", url)
    assert code == 1 and "text.nosuch is not installed" in err
    # One version installed: enable picks it (an explicit --version works the same).
    code, out, err = await cli("plugins", "enable", "text.wordfreq", "--url", url)
    assert code == 0 and out.strip() == "enabled text.wordfreq 1.0.0", err
    code, out, err = await cli("plugins", "enable", "text.wordfreq", "--version", "1.0.0", "--url", url)
    assert code == 0 and out.strip() == "enabled text.wordfreq 1.0.0", err
    await wait_serving(pclient, "text.wordfreq", "1.0.0")
    await grant(pclient, token, team, "tool.text.wordfreq.invoke")
    status, body = await invoke(pclient, token(team=team), "text.wordfreq", {"text": "b a b"})
    assert (status, body["output"]["words"][0]) == (200, {"word": "b", "count": 2})
    code, _, err = await cli("plugins", "remove", "text.wordfreq", "--url", url)
    assert code == 1 and "needs --version" in err
    code, _, err = await cli("plugins", "remove", "text.wordfreq", "--version", "1.0.0", "--url", url)
    assert code == 1 and "plugin_enabled" in err
    code, out, _ = await cli("plugins", "disable", "text.wordfreq", "--url", url)
    assert code == 0 and out.strip() == "disabled text.wordfreq 1.0.0"
    code, out, _ = await cli("plugins", "remove", "text.wordfreq", "--version", "1.0.0", "--url", url)
    assert code == 0 and out.strip() == "removed text.wordfreq 1.0.0"
    code, out, _ = await cli("plugins", "list", "--url", url)
    assert code == 0 and out.strip() == "no plugins installed"
    code, _, err = await cli("plugins", "install", "/nonexistent/bundle", "--url", url)
    assert code == 1 and "no such directory or file" in err
