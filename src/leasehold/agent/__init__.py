"""The bounded document-preparation agent (arch §7): pure, engine-independent parts.

A planner *proposes* the next tool from the checkpoint alone; `guard.check_proposal` decides,
in trusted code, whether it may run; `runner.run_tool` applies one tool and returns the next
checkpoint. Nothing here does I/O except `hosted.HostedPlanner`, which is off by default.
"""
