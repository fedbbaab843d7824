"""Collaborative coding: agents write a helper, the entry-point function, tests and reviews of one program."""
