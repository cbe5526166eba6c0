"""vjp, jvp, jacobian, hessian. Being written."""
