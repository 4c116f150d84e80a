"""Op families priced by the estimator: the mode ladder (base), one module or sub-package per family, the registry."""
