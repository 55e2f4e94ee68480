//===- DSInterfaces.td - per-op facts of the ds dialect ----*- tablegen -*-===//
//
// What passes need to know about an op, asked of the op instead of kept in
// a switch per pass: how to differentiate it (autodiff), how it may be
// split over a device mesh (sharding), how it runs (the plan's kernel step).
// Each op family implements them beside each other in dialects/ds/ops/, so
// adding an op, or a pass that asks a new question of every op, touches one
// place. See docs/dialects/RationaleDS.md ("Op facts are interfaces").
//
//===----------------------------------------------------------------------===//
#ifndef DS_INTERFACES_TD
#define DS_INTERFACES_TD

include "mlir/IR/OpBase.td"
include "mlir/IR/Interfaces.td"

//===----------------------------------------------------------------------===//
// Traits
//===----------------------------------------------------------------------===//

// Result element i is a function of the operands' elements at i under numpy
// broadcasting, and of nothing else. (MLIR's own `Elementwise` trait
// forbids broadcasting, which every binary ds op does.)
def DS_ElementwiseTrait : NativeOpTrait<"Elementwise"> {
  let cppNamespace = "::mlir::OpTrait::ds";
}

// Moves elements without computing any (reshape, squeeze, unsqueeze,
// transpose): a split of the input is a split of the result, somewhere.
def DS_LayoutOnly : NativeOpTrait<"LayoutOnly"> {
  let cppNamespace = "::mlir::OpTrait::ds";
}

//===----------------------------------------------------------------------===//
// Gradients
//===----------------------------------------------------------------------===//

def DS_GradientOpInterface : OpInterface<"GradientOpInterface"> {
  let cppNamespace = "::mlir::ds";
  let description = [{
    Reverse-mode differentiation of one op, as ds-build-train-step's
    autodiff asks for it: given the gradients of the op's results (null
    where a result has none), build the gradients of its operands. An op
    without this interface on the path from a trained parameter to the loss
    is an error naming the op.
  }];
  let methods = [
    InterfaceMethod<[{
        Sets `operandGrads[i]` to the gradient of operand i (left null when
        the operand gets none, e.g. integer indices). `resultGrads` has one
        entry per result; at least one is not null. New ops are created
        through `gb` at the op's location.
      }],
      "::mlir::LogicalResult", "buildGradients",
      (ins "::mlir::ds::GradientBuilder &":$gb,
           "::llvm::ArrayRef<::mlir::Value>":$resultGrads,
           "::llvm::MutableArrayRef<::mlir::Value>":$operandGrads)>,
  ];
}

//===----------------------------------------------------------------------===//
// Sharding rules
//===----------------------------------------------------------------------===//

def DS_ShardingRuleOpInterface : OpInterface<"ShardingRuleOpInterface"> {
  let cppNamespace = "::mlir::ds";
  let description = [{
    How an op may compute on split tensors, in the spirit of MLIR's
    ShardingInterface and Shardy's per-op rules: given the shardings its
    operands arrive with, the shardings it needs of its operands and the
    ones its results get. ds-propagate-sharding applies the rule;
    ds-insert-collectives applies it again and moves every operand to the
    sharding the op needs. Ops without the interface (or whose rule returns
    no decision) compute on replicated values, which is always correct.
  }];
  let methods = [
    InterfaceMethod<[{
        The decision for operands arriving as `operands` on `mesh`; an
        empty decision means "replicate".
      }],
      "::mlir::ds::ShardingDecision", "getShardingRule",
      (ins "::llvm::ArrayRef<::mlir::ds::Sharding>":$operands,
           "::mlir::ds::MeshAttr":$mesh),
      /*methodBody=*/[{}],
      /*defaultImplementation=*/[{
        return ::mlir::ds::defaultShardingRule($_op.getOperation(), operands);
      }]>,
  ];
}

//===----------------------------------------------------------------------===//
// Kernel steps
//===----------------------------------------------------------------------===//

def DS_KernelStepOpInterface : OpInterface<"KernelStepOpInterface"> {
  let cppNamespace = "::mlir::ds";
  let description = [{
    How an op runs: the runtime kernel it becomes, the stream it runs on
    and the kernel's attributes. The plan emitter writes this as a plan
    step and constant folding runs the same kernel at compile time, so a
    folded constant is what ds-run would compute. The kernel is named after
    the op unless the op says otherwise. Ops without the interface
    (constants, parameters) have no step.
  }];
  let methods = [
    InterfaceMethod<[{
        Fills `step` (whose kernel is preset to the op's name, stream 0):
        attributes the kernel reads, and another kernel or stream if any.
      }],
      "void", "describeKernelStep", (ins "::mlir::ds::KernelStep &":$step),
      /*methodBody=*/[{}],
      /*defaultImplementation=*/[{ (void)step; /* the op's name, no attributes */ }]>,
  ];
}

//===----------------------------------------------------------------------===//
// Shorthands for DSOps.td
//===----------------------------------------------------------------------===//

// Elementwise ops share one sharding rule (the interface's default).
def DS_Elementwise : TraitList<[DS_ElementwiseTrait, DS_ShardingRuleOpInterface]>;
// The op implements buildGradients beside its family.
defvar DS_Differentiable = DeclareOpInterfaceMethods<DS_GradientOpInterface>;
// The op implements getShardingRule beside its family.
defvar DS_OwnShardingRule =
    DeclareOpInterfaceMethods<DS_ShardingRuleOpInterface, ["getShardingRule"]>;

#endif // DS_INTERFACES_TD
