"""The Pulumi programs of the projects in stacks/ (their Pulumi.yaml and `__main__.py` stay there): ComponentResources
with typed config. gridready runs them inline through the Automation API (gridready.pulumi); the Pulumi CLI runs
them from stacks/<project>/__main__.py, which imports them from the installed gridready package."""
