"""Pure rules: text normalisation, fusion, filters, validity and ranking. No I/O."""
