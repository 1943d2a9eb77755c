"""What a client message costs besides its training maths (issue 91: per-client fixed costs at 1,000 clients): each
shortcut gives what the long way gives, and a changed input takes the long way again."""

import pytest
import torch

from flowergraph.tasks.compute import seed_torch


# ------------------------------------------------------------------------------------------------ seed_torch
@pytest.mark.parametrize("seed", [0, 7, 2**40 + 3, 2**63 - 1])
def test_seed_torch_draws_what_manual_seed_draws(seed):
    torch.manual_seed(seed)
    want = (torch.rand(5), torch.randn(3, 2), torch.nn.functional.dropout(torch.ones(16), 0.5, True))
    torch.manual_seed(12345)  # something else first: seed_torch must reset it
    torch.rand(3)
    seed_torch(seed)
    got = (torch.rand(5), torch.randn(3, 2), torch.nn.functional.dropout(torch.ones(16), 0.5, True))
    for a, b in zip(want, got):
        assert torch.equal(a, b)


def test_seed_torch_leaves_the_same_generator_state():
    torch.manual_seed(99)
    want = torch.get_rng_state()
    seed_torch(99)
    assert torch.equal(torch.get_rng_state(), want)
