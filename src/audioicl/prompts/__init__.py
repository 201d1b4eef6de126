"""Episode → typed chat: the chat types, prompt sets, clips, layouts, study controls and probes."""
