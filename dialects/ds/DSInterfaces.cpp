//===- DSInterfaces.cpp - per-op facts of the ds dialect ------------------===//
#include "dialects/ds/DSInterfaces.h"

#include "dialects/ds/GradientBuilder.h"

#include "dialects/ds/DSInterfaces.cpp.inc"
