"""What a call leaves behind and the journal that makes it durable: call rows, usage, events, runs, and reading them back from any replica."""
