"""`mcpdebug merge`: stores, spool folders and unpacked CI artifacts joined into one store.

- `sources`: what each path given holds (stores, spool files), found by walking it
- `spools`: a spool file's events through the one writer (`Store.apply`), conflicts left out
- `stores`: another store's runs copied in, table by table, conflicts left out
- `conflicts`: what the merged store already holds that a source contradicts, and how it is said
- `command`: the command itself: the order of the work and what it prints
"""
