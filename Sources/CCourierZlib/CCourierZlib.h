// zlib, found through pkg-config (zlib.pc). Without it, SwiftPM prints the apt command that
// installs it (Package.swift's `providers`): `apt-get install zlib1g-dev`.
#include <zlib.h>
