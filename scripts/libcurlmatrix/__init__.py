"""scripts/libcurl-matrix's parts: building libcurl releases (curlbuild), building and testing
Courier against one (swiftrun), and the table (report). The command line is in the script."""
