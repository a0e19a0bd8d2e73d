"""The OpenAI surface: the callable catalog as OpenAI tools, and tool calls run through the pipeline."""
