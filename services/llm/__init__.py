"""Category C `llm.chat`: a chat completion against the configured OpenAI-compatible
upstream (TOOLPROXY_LLM_*). The key stays here; `model: "auto"` asks the router's rules."""
