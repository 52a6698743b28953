"""Linear Road benchmark: context-aware versus context-independent execution
and the L-rating (`python -m bench.linear_road.run`)."""
