"""A tool call's arguments, checked before any work is spent on them: size, then schema."""
