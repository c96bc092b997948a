"""The DISK suite: round trips through DISK views into every selected device, and files made by other tools."""
