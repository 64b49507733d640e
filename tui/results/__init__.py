"""What runs leave: the record, the store, the tables, references and the report."""
