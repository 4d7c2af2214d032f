// libcurl, found through pkg-config (libcurl.pc). Without it, SwiftPM prints the apt command
// that installs it (Package.swift's `providers`): `apt-get install libcurl4-openssl-dev`.
#include <curl/curl.h>
