# Third-party libraries of the runtime (and of the compiler's plan writer).
# Why each was chosen is in docs/dependencies.md.
find_package(Protobuf REQUIRED)
find_package(absl REQUIRED CONFIG)
find_package(ZLIB REQUIRED)
find_package(OpenMP REQUIRED)
find_package(PkgConfig REQUIRED)
pkg_check_modules(LIBZIP REQUIRED IMPORTED_TARGET GLOBAL libzip)
find_package(ONNX REQUIRED CONFIG) # the protobuf schema, for --export-onnx and the importer
