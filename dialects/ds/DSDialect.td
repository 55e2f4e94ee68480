//===- DSDialect.td - the ds tensor dialect ----------------*- tablegen -*-===//
//
// The tensor-level dialect ONNX models are imported into: value semantics,
// static shapes, one op per operator family. Sharding, offload and plan
// passes work on it; see docs/dialects/RationaleDS.md.
//
//===----------------------------------------------------------------------===//
#ifndef DS_DIALECT_TD
#define DS_DIALECT_TD

include "mlir/IR/OpBase.td"
include "mlir/IR/AttrTypeBase.td"
include "dialects/ds/DSInterfaces.td"

def DS_Dialect : Dialect {
  let name = "ds";
  let cppNamespace = "::mlir::ds";
  let summary = "Tensor-level IR of the ds compiler";
  let description = [{
    Ops on statically shaped tensors with value semantics. Elementwise binary
    ops broadcast like numpy; every op's result type is determined by its
    operands and attributes (or stated, for reshape-like ops) and checked by
    its verifier, so an importer bug surfaces as a verification error, not
    as a wrong kernel launch.
  }];
  let useDefaultAttributePrinterParser = 1;
  let hasConstantMaterializer = 1;
}

// An op that runs as a kernel step. `stepMethods` names the
// KernelStepOpInterface methods the op implements itself (in
// dialects/ds/ops/, beside its family): those that write attributes or
// pick another kernel. Use DS_OwnStep for that.
class DS_Op<string mnemonic, list<Trait> traits = [], list<string> stepMethods = []>
    : Op<DS_Dialect, mnemonic,
         traits # [DeclareOpInterfaceMethods<DS_KernelStepOpInterface, stepMethods>]>;
defvar DS_OwnStep = ["describeKernelStep"];

// An op that is data rather than a step (constants, parameters): the plan
// stores its value.
class DS_DataOp<string mnemonic, list<Trait> traits = []>
    : Op<DS_Dialect, mnemonic, traits>;

#endif // DS_DIALECT_TD
