"""Studies over many fits: surfaces, their devices, stores and clusters."""
