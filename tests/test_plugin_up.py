"""`toolproxy up` runs the plugin host: a plugin installed with the CLI serves through it."""

from __future__ import annotations

import time
from pathlib import Path

from infra.embedded.ports import free_port
from tests.support.plugin_harness import EXAMPLES
from tests.support.up_process import Up, cli, post


def test_up_serves_an_installed_plugin(data_dir: Path) -> None:
    up = Up(data_dir, free_port())
    try:
        url = up.wait_ready()
        assert "plugins" in up.runtime()["children"]
        assert cli("plugins", "install", str(EXAMPLES / "text_wordfreq"), data_dir=data_dir) \
            .startswith("installed text.wordfreq 1.0.0")
        assert cli("plugins", "enable", "text.wordfreq", "--version", "1.0.0",
                   data_dir=data_dir) == "enabled text.wordfreq 1.0.0"
        cli("grants", "add", "--team", "t1", "--capability", "tool.text.wordfreq.invoke",
            data_dir=data_dir)
        token = cli("token", "--agent", "a1", "--team", "t1", data_dir=data_dir)
        for _ in range(100):  # the plugin host follows the registry within a moment
            status, body = post(f"{url}/v1/tools/invoke",
                                {"tool": "text.wordfreq", "args": {"text": "up up away"}}, token)
            if status == 200:
                break
            time.sleep(0.1)
        assert (status, body["output"]["words"][0]) == (200, {"word": "up", "count": 2}), body
    finally:
        code = up.stop()
    assert code == 0, up.stderr()
