"""{{cookiecutter.project_slug}}: job kinds run by leasehold (see kinds.py)."""
