"""The report's sections: what each decides (verdict, stability, failures) and shows (tables, charts, the capacity, layer, pooling, structured-output and agent-programs sections), from the rows."""
