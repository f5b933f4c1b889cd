"""database access: pool, migrations, named queries.

`migrate` applies memory_agent's numbered migrations, re-creates the views and functions of sql/definitions/
and creates or upgrades procrastinate's schema; `keys` holds the row key (tenant, user) and its default scope.
Nothing here imports the service, the integrations or the CLI.
"""
