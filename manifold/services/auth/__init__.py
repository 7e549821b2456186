"""Who is asking: logins, tokens, passwords, lock-outs, signs, users and their keys."""
