"""Who may do what, and how much: bearer tokens per namespace, and the caps on what a tenant
can create."""
