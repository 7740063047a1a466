"""A user's own sitecustomize: gpurec's must still run it."""
import os

open(os.environ["USER_SITE_MARK"], "w").write("ran\n")
