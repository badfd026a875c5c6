"""Teams of agents: agents that work together in one run, or check each other's work."""
