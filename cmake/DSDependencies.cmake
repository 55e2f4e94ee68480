# Third-party libraries of the runtime (and of the compiler's plan writer).
# Why each was chosen is in docs/dependencies.md.
find_package(Protobuf REQUIRED)
find_package(absl REQUIRED CONFIG)
find_package(ZLIB REQUIRED)
find_package(OpenMP REQUIRED)
find_package(PkgConfig REQUIRED)
pkg_check_modules(LIBZIP REQUIRED IMPORTED_TARGET GLOBAL libzip)
set(BLA_VENDOR OpenBLAS)
find_package(BLAS REQUIRED)
find_path(CBLAS_INCLUDE_DIR cblas.h PATH_SUFFIXES openblas-pthread openblas
          PATHS /usr/include/x86_64-linux-gnu /usr/include REQUIRED)
find_package(ONNX REQUIRED CONFIG) # the protobuf schema, for --export-onnx and the importer
