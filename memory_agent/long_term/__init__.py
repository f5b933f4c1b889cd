"""Per-user long-term memory (next issue): items with validity over time, recall across conversations.

Empty for now; its code goes here, beside the short-term tier in conversation/.
"""
