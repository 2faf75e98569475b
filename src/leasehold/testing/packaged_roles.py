"""The functions' execution roles as template.yaml writes them: the packaged copy a testbed
judges calls by when no template is at hand (leasehold.testing.definitions.PACKAGED).
tests/integration/test_testing_definitions.py checks it says what template.yaml says; after a
change to a role, regenerate it from `Definitions.from_template(SOURCE_TEMPLATE).roles`."""

from typing import Any

PACKAGED_ROLES: dict[str, Any] = {
    "Parameters": {
        "HostedPlannerApiKeySecretArn": {"Default": ""},
        "TableKmsKeyArn": {"Default": ""},
    },
    "Conditions": {
        "HasHostedPlannerKey": {
            "Fn::Not": [{"Fn::Equals": [{"Ref": "HostedPlannerApiKeySecretArn"}, ""]}]
        },
        "HasTableKey": {"Fn::Not": [{"Fn::Equals": [{"Ref": "TableKmsKeyArn"}, ""]}]},
    },
    "Resources": {
        "ApiFunction": {
            "Type": "AWS::Serverless::Function",
            "Properties": {"Role": {"Fn::GetAtt": "ApiRole.Arn"}},
        },
        "RelayFunction": {
            "Type": "AWS::Serverless::Function",
            "Properties": {"Role": {"Fn::GetAtt": "RelayRole.Arn"}},
        },
        "WorkerFunction": {
            "Type": "AWS::Serverless::Function",
            "Properties": {"Role": {"Fn::GetAtt": "WorkerRole.Arn"}},
        },
        "SweeperFunction": {
            "Type": "AWS::Serverless::Function",
            "Properties": {"Role": {"Fn::GetAtt": "SweeperRole.Arn"}},
        },
        "ApiRole": {
            "Type": "AWS::IAM::Role",
            "Properties": {
                "AssumeRolePolicyDocument": {
                    "Version": "2012-10-17",
                    "Statement": [
                        {
                            "Effect": "Allow",
                            "Principal": {"Service": "lambda.amazonaws.com"},
                            "Action": "sts:AssumeRole",
                        }
                    ],
                },
                "Policies": [
                    {
                        "PolicyName": "api",
                        "PolicyDocument": {
                            "Version": "2012-10-17",
                            "Statement": [
                                {
                                    "Effect": "Allow",
                                    "Action": ["logs:CreateLogStream", "logs:PutLogEvents"],
                                    "Resource": {"Fn::GetAtt": "ApiLogGroup.Arn"},
                                },
                                {
                                    "Effect": "Allow",
                                    "Action": [
                                        "dynamodb:GetItem",
                                        "dynamodb:PutItem",
                                        "dynamodb:UpdateItem",
                                        "dynamodb:DeleteItem",
                                        "dynamodb:ConditionCheckItem",
                                        "dynamodb:BatchGetItem",
                                        "dynamodb:Query",
                                    ],
                                    "Resource": [
                                        {"Fn::GetAtt": "JobsTable.Arn"},
                                        {"Fn::Sub": "${JobsTable.Arn}/index/by_state"},
                                        {"Fn::Sub": "${JobsTable.Arn}/index/by_owner"},
                                    ],
                                },
                                {
                                    "Effect": "Allow",
                                    "Action": ["sqs:GetQueueAttributes"],
                                    "Resource": [
                                        {"Fn::GetAtt": "WorkQueue.Arn"},
                                        {"Fn::GetAtt": "HighPriorityQueue.Arn"},
                                        {"Fn::GetAtt": "LowPriorityQueue.Arn"},
                                        {"Fn::GetAtt": "DeadLetterQueue.Arn"},
                                    ],
                                },
                                {
                                    "Effect": "Allow",
                                    "Action": ["sqs:ReceiveMessage", "sqs:DeleteMessage"],
                                    "Resource": {"Fn::GetAtt": "DeadLetterQueue.Arn"},
                                },
                                {
                                    "Effect": "Allow",
                                    "Action": ["sqs:SendMessage"],
                                    "Resource": [
                                        {"Fn::GetAtt": "WorkQueue.Arn"},
                                        {"Fn::GetAtt": "HighPriorityQueue.Arn"},
                                        {"Fn::GetAtt": "LowPriorityQueue.Arn"},
                                    ],
                                },
                            ],
                        },
                    }
                ],
            },
        },
        "RelayRole": {
            "Type": "AWS::IAM::Role",
            "Properties": {
                "AssumeRolePolicyDocument": {
                    "Version": "2012-10-17",
                    "Statement": [
                        {
                            "Effect": "Allow",
                            "Principal": {"Service": "lambda.amazonaws.com"},
                            "Action": "sts:AssumeRole",
                        }
                    ],
                },
                "Policies": [
                    {
                        "PolicyName": "relay",
                        "PolicyDocument": {
                            "Version": "2012-10-17",
                            "Statement": [
                                {
                                    "Effect": "Allow",
                                    "Action": ["logs:CreateLogStream", "logs:PutLogEvents"],
                                    "Resource": {"Fn::GetAtt": "RelayLogGroup.Arn"},
                                },
                                {
                                    "Effect": "Allow",
                                    "Action": ["sqs:SendMessage"],
                                    "Resource": [
                                        {"Fn::GetAtt": "WorkQueue.Arn"},
                                        {"Fn::GetAtt": "HighPriorityQueue.Arn"},
                                        {"Fn::GetAtt": "LowPriorityQueue.Arn"},
                                        {"Fn::GetAtt": "RelayFailureQueue.Arn"},
                                    ],
                                },
                                {
                                    "Effect": "Allow",
                                    "Action": [
                                        "dynamodb:DescribeStream",
                                        "dynamodb:GetRecords",
                                        "dynamodb:GetShardIterator",
                                        "dynamodb:ListStreams",
                                    ],
                                    "Resource": [{"Fn::GetAtt": "JobsTable.StreamArn"}],
                                },
                            ],
                        },
                    }
                ],
            },
        },
        "WorkerRole": {
            "Type": "AWS::IAM::Role",
            "Properties": {
                "AssumeRolePolicyDocument": {
                    "Version": "2012-10-17",
                    "Statement": [
                        {
                            "Effect": "Allow",
                            "Principal": {"Service": "lambda.amazonaws.com"},
                            "Action": "sts:AssumeRole",
                        }
                    ],
                },
                "Policies": [
                    {
                        "PolicyName": "worker",
                        "PolicyDocument": {
                            "Version": "2012-10-17",
                            "Statement": [
                                {
                                    "Effect": "Allow",
                                    "Action": ["logs:CreateLogStream", "logs:PutLogEvents"],
                                    "Resource": {"Fn::GetAtt": "WorkerLogGroup.Arn"},
                                },
                                {
                                    "Effect": "Allow",
                                    "Action": [
                                        "dynamodb:GetItem",
                                        "dynamodb:PutItem",
                                        "dynamodb:UpdateItem",
                                        "dynamodb:ConditionCheckItem",
                                        "dynamodb:BatchGetItem",
                                    ],
                                    "Resource": [{"Fn::GetAtt": "JobsTable.Arn"}],
                                },
                                {
                                    "Effect": "Allow",
                                    "Action": [
                                        "sqs:SendMessage",
                                        "sqs:ChangeMessageVisibility",
                                        "sqs:ReceiveMessage",
                                        "sqs:DeleteMessage",
                                        "sqs:GetQueueAttributes",
                                    ],
                                    "Resource": [
                                        {"Fn::GetAtt": "WorkQueue.Arn"},
                                        {"Fn::GetAtt": "HighPriorityQueue.Arn"},
                                        {"Fn::GetAtt": "LowPriorityQueue.Arn"},
                                    ],
                                },
                                {
                                    "Effect": "Allow",
                                    "Action": ["s3:GetObject"],
                                    "Resource": {
                                        "Fn::Sub": "${DocumentsBucket.Arn}/tenants/*/documents/*"
                                    },
                                },
                            ],
                        },
                    }
                ],
            },
        },
        "WorkerHostedPlannerKeyPolicy": {
            "Type": "AWS::IAM::Policy",
            "Condition": "HasHostedPlannerKey",
            "Properties": {
                "PolicyName": "hosted-planner-key",
                "Roles": [{"Ref": "WorkerRole"}],
                "PolicyDocument": {
                    "Version": "2012-10-17",
                    "Statement": [
                        {
                            "Effect": "Allow",
                            "Action": ["secretsmanager:GetSecretValue"],
                            "Resource": {"Ref": "HostedPlannerApiKeySecretArn"},
                        }
                    ],
                },
            },
        },
        "TableKeyUsePolicy": {
            "Type": "AWS::IAM::Policy",
            "Condition": "HasTableKey",
            "Properties": {
                "PolicyName": "table-key",
                "Roles": [
                    {"Ref": "ApiRole"},
                    {"Ref": "RelayRole"},
                    {"Ref": "WorkerRole"},
                    {"Ref": "SweeperRole"},
                ],
                "PolicyDocument": {
                    "Version": "2012-10-17",
                    "Statement": [
                        {
                            "Effect": "Allow",
                            "Action": [
                                "kms:Decrypt",
                                "kms:Encrypt",
                                "kms:GenerateDataKey*",
                                "kms:ReEncrypt*",
                                "kms:DescribeKey",
                            ],
                            "Resource": {"Ref": "TableKmsKeyArn"},
                            "Condition": {
                                "StringEquals": {
                                    "kms:ViaService": {
                                        "Fn::Sub": "dynamodb.${AWS::Region}.amazonaws.com"
                                    }
                                }
                            },
                        }
                    ],
                },
            },
        },
        "SweeperRole": {
            "Type": "AWS::IAM::Role",
            "Properties": {
                "AssumeRolePolicyDocument": {
                    "Version": "2012-10-17",
                    "Statement": [
                        {
                            "Effect": "Allow",
                            "Principal": {"Service": "lambda.amazonaws.com"},
                            "Action": "sts:AssumeRole",
                        }
                    ],
                },
                "Policies": [
                    {
                        "PolicyName": "sweeper",
                        "PolicyDocument": {
                            "Version": "2012-10-17",
                            "Statement": [
                                {
                                    "Effect": "Allow",
                                    "Action": ["logs:CreateLogStream", "logs:PutLogEvents"],
                                    "Resource": {"Fn::GetAtt": "SweeperLogGroup.Arn"},
                                },
                                {
                                    "Effect": "Allow",
                                    "Action": [
                                        "dynamodb:GetItem",
                                        "dynamodb:PutItem",
                                        "dynamodb:UpdateItem",
                                        "dynamodb:ConditionCheckItem",
                                        "dynamodb:BatchGetItem",
                                        "dynamodb:Query",
                                    ],
                                    "Resource": [
                                        {"Fn::GetAtt": "JobsTable.Arn"},
                                        {"Fn::Sub": "${JobsTable.Arn}/index/by_state"},
                                    ],
                                },
                            ],
                        },
                    }
                ],
            },
        },
        "ApiLogGroup": {"Type": "AWS::Logs::LogGroup"},
        "DeadLetterQueue": {"Type": "AWS::SQS::Queue"},
        "DocumentsBucket": {"Type": "AWS::S3::Bucket"},
        "HighPriorityQueue": {"Type": "AWS::SQS::Queue"},
        "JobsTable": {"Type": "AWS::DynamoDB::Table"},
        "LowPriorityQueue": {"Type": "AWS::SQS::Queue"},
        "RelayFailureQueue": {"Type": "AWS::SQS::Queue"},
        "RelayLogGroup": {"Type": "AWS::Logs::LogGroup"},
        "SweeperLogGroup": {"Type": "AWS::Logs::LogGroup"},
        "WorkQueue": {"Type": "AWS::SQS::Queue"},
        "WorkerLogGroup": {"Type": "AWS::Logs::LogGroup"},
    },
}
