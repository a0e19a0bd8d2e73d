"""The tool services reached over NATS: `sdk/` (serving), one folder per tool family, each of
one shape — service.py (the factory `service(...)`), manifests.py (its catalog entries),
store.py (its Postgres access), ops.py (pure logic), config.py (settings), errors.py (its tool
error codes), as the family needs them — what families share (`netguard/`, and `platforms/`
for the three platform families inside it), the plugin host `plugins/`; builtin.py composes
the families and runner.py runs them."""
