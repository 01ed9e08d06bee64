"""An optimizer run in backward (a post-accumulate-grad hook that steps and clears .grad), with a saved tensor
changed through `.data` before that backward."""
import torch

torch.manual_seed(0)
w = torch.randn(4, requires_grad=True)
x = torch.randn(4)
seen = []


def step_in_backward(p: torch.Tensor) -> None:
    seen.append(p.grad.clone())
    with torch.no_grad():
        p -= 0.1 * p.grad
    p.grad = None


w.register_post_accumulate_grad_hook(step_in_backward)
s = torch.sigmoid(w * x)  # SigmoidBackward0 saves its result
s.data.mul_(0.5)
s.sum().backward()
grad = seen[0]
print("w.grad in the hook:", grad)
