"""The embedded local stack: moto server + resources from template.yaml + event-source pumps +
an HTTP gateway. Never imported by a Lambda handler."""
