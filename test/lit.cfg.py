# lit configuration shared by every suite under test/.
import os
import shutil
import subprocess

import lit.formats

config.name = "ds"
config.test_format = lit.formats.ShTest(execute_external=False)
config.suffixes = [".mlir", ".onnxtxt", ".test", ".py"]
config.excludes = ["lit.cfg.py", "lit.site.cfg.py", "Inputs", "lib"]
config.test_source_root = os.path.dirname(__file__)

site = lit_config.params.get("ds_site")
if not site:
    lit_config.fatal("run lit through ctest, or pass --param ds_site=BUILD/test/lit.site.cfg.py")
lit_config.load_config(config, site)
config.test_exec_root = os.path.join(config.ds_obj_root, "test")

config.environment["FILECHECK_OPTS"] = "-enable-var-scope --allow-unused-prefixes=false"
config.environment["PATH"] = os.pathsep.join(
    [config.ds_tools_dir, config.llvm_tools_dir, config.environment.get("PATH", os.environ["PATH"])])
# Tests use few threads: the machines are shared and small.
config.environment["OMP_NUM_THREADS"] = "2"
config.environment["OPENBLAS_NUM_THREADS"] = "2"
for var in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE", "HOME"):
    if var in os.environ:
        config.environment[var] = os.environ[var]

config.substitutions.append(("%python", config.python))
# Multi-rank tests: OpenMPI's launcher, allowed as root and on more ranks
# than cores (CI machines are small).
if shutil.which("mpirun"):
    config.available_features.add("mpi")
    config.substitutions.append(("%mpirun", "mpirun --allow-run-as-root --oversubscribe"))
config.substitutions.append(("%ds_src", config.ds_src_root))
config.substitutions.append(("%testlib", os.path.join(config.ds_src_root, "test", "lib")))

def python_has(module):
    try:
        return subprocess.run([config.python, "-c", "import " + module],
                              capture_output=True, timeout=120).returncode == 0
    except Exception:
        return False

if config.build_compiler:
    config.available_features.add("compiler")
for module in ("onnx", "numpy", "torch", "torchvision"):
    if python_has(module):
        config.available_features.add(module)
# GPU tests need a device, not just the toolkit.
if shutil.which("nvidia-smi") and subprocess.run(["nvidia-smi", "-L"], capture_output=True).returncode == 0:
    config.available_features.add("cuda")
