"""leasehold: a durable background-job system on AWS serverless parts."""

__version__ = "0.1.0"
