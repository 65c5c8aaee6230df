"""Role tests on the sandbox fleet (testinfra over ssh)."""
