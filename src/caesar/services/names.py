"""The services of a deployment, by name: settings, the deployment and the
benchmarks check names against these without importing the services."""

# The pipeline's services, in the order data flows through them.
PIPELINE = ("scheduler", "deriver", "router", "matcher")
# Services only some models need: "acep" for a model with shared tables (one
# actor owns every partition).
OPTIONAL = ("acep",)
