"""PTX text -> syntax nodes: ``lexer`` (tokens), ``tokens`` (a cursor), ``declarations`` and ``body`` (the two kinds of
statement), ``parser`` (module level), producing the nodes of ``syntax``."""
