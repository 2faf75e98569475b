"""Pure domain: states, transitions, policies. No boto3, no I/O."""
