"""The report's sections: what each decides (verdict, stability, failures) and shows (tables, charts, the capacity, layer, pooling and structured-output sections), from the rows."""
