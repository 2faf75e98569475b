"""The only place that knows DynamoDB and SQS: keys, items, conditions, transactions."""
