"""Label Zachary's karate club from its two leaders, and look at the attention.

Run: python examples/karate_attention.py [--epochs E]
"""

import argparse

import torch

from graphattn.datasets import load_node_dataset
from graphattn.featurize import to_networkx
from graphattn.splits import fixed_train_masks
from graphattn.train import NodeTrainConfig, train_node_model
from graphattn.train.nodes import DATASET_DEFAULTS

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("--epochs", type=int, help="default: karate's tuned number")
args = parser.parse_args()

data = load_node_dataset("karate")
train, val, test = fixed_train_masks(data.y, data.default_train_nodes)
settings = dict(DATASET_DEFAULTS["karate"])
if args.epochs is not None:
    settings["epochs"] = args.epochs
config = NodeTrainConfig(**settings)
masks = {"train": train, "val": val, "test": test}
metrics = train_node_model(data, masks, config, dataset_name="karate")
print(f"{metrics['test']['correct']}/{metrics['test']['total']} members labelled correctly")

model = metrics["model"].eval()
with torch.no_grad():
    # a model with label inputs reads the training labels too (None here: 2 of 34)
    known = metrics["known_labels"]
    logits, attentions = model(data.x, data.edge_index, known, return_attention=True)
graph = to_networkx(data, predictions=logits.argmax(-1), attention=attentions[-1])
strongest = max(graph.edges(data=True), key=lambda e: e[2].get("attention", 0))
print("most attended tie in the last layer:", strongest[:2], round(strongest[2]["attention"], 3))
