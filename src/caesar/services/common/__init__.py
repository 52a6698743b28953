"""What every service shares: the messages between processors, their Avro
records on the internal topics (wire), the runner loop with its commit order,
the runner configuration and the wiring of the four services onto a bus."""
