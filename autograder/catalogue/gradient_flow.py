"""The catalogue of `gradient_flow`'s mistakes (VARIANTS): names, titles and Chinese explanations, no torch.

autograder/checks/gradient_flow.py reproduces each mistake on its checks' inputs and names it when the student's value
matches (autograder.checks.match_variant); reports and summaries read the texts from here."""

from autograder.catalogue import Variant, catalogue

POST = "norms[i](x + relu(layers[i](x)))"
PRE = "x + relu(layers[i](norms[i](x)))"

VARIANTS = catalogue(
    # --- the multiple-choice letter: the misconception of the option the letter points to -------------------
    Variant("choice_norm_after_sublayer",
            "你选的选项说 Pre-Norm 把 Norm 放在子层之后：这把两种结构弄反了（本章作业 3 原题的定义也写反了）。"
            "Norm 在子层和残差相加之后的是 Post-Norm：x = Norm(x + F(x))；Pre-Norm 是 x + F(Norm(x))，Norm 在子层之前，"
            "只在分支上。想一想梯度沿残差路径从深层传回浅层时，两种结构里各要经过什么",
            title="选项：Pre-Norm 的 Norm 在子层之后"),
    Variant("choice_postnorm_no_residual",
            "你选的选项说 Post-Norm 没有残差连接：它有，x = Norm(x + F(x))，子层的输出先与 x 相加再做 Norm。"
            "两种结构都有残差，区别在于 Norm 相对残差路径放在哪里",
            title="选项：Post-Norm 没有残差"),
    Variant("choice_fewer_params",
            "你选的选项说 Pre-Norm 的参数更少：两种结构的参数完全相同（每层一个 Linear、一个 LayerNorm，本作业两个类的"
            "参数名和形状都一样），只是 Norm 的位置不同，所以参数量解释不了梯度的差别",
            title="选项：Pre-Norm 参数更少"),
    # --- PostNormStack / PreNormStack -------------------------------------------------------------------------
    Variant("pre_post_swapped",
            f"你的这个类算的是另一种结构：Post-Norm 是 x = {POST}（先相加，再 Norm），Pre-Norm 是 x = {PRE}"
            "（先 Norm，再进子层，最后加回 x 本身）。两个类是不是写反了，或者复制后忘了改？",
            title="Pre-Norm 与 Post-Norm 写反了"),
    Variant("chapter_definitions",
            "你的两个类是按本章作业 3 原题的定义写的：原题把 x + F(Norm(x)) 叫作 Post-Norm、把 x + Norm(F(x)) 叫作 "
            "Pre-Norm，这是原题写错了（本章 3.1、3.3 节和 Deep_PostNorm / Deep_PreNorm 的代码才是对的）。"
            f"Post-Norm 是 x = {POST}，Pre-Norm 是 x = {PRE}；x + Norm(F(x)) 是第三种结构",
            title="按原题写反的定义"),
    Variant("norm_on_branch",
            "你的输出与 x = x + norms[i](relu(layers[i](x))) 一致：Norm 放在了分支的出口，这是第三种结构，"
            f"既不是 Pre-Norm 也不是 Post-Norm。Post-Norm 的 Norm 在相加之后：x = {POST}；"
            f"Pre-Norm 的 Norm 在子层之前：x = {PRE}",
            title="Norm 放在了分支出口"),
    Variant("residual_dropped",
            "丢了残差：每层只算了分支，没有把本层的输入 x 加回来（例如 Post-Norm 写成了 norms[i](relu(layers[i](x)))，"
            f"或 Pre-Norm 写成了 relu(layers[i](norms[i](x)))）。Post-Norm 是 x = {POST}，Pre-Norm 是 x = {PRE}",
            title="丢了残差"),
    Variant("residual_normed",
            "残差加的是 Norm(x) 而不是 x 本身：h = norms[i](x); x = h + relu(layers[i](h))。Pre-Norm 的 Norm 只在分支上，"
            f"残差路径是恒等的：x = {PRE}，这正是它梯度稳定的原因",
            title="残差加的是 Norm(x)"),
    Variant("relu_after_add",
            "ReLU 放在了残差相加之后，作用在了整条残差流上（例如 norms[i](relu(x + layers[i](x)))）。ReLU 属于子层分支："
            f"先算 relu(layers[i](...))，再与 x 相加：Post-Norm 是 x = {POST}，Pre-Norm 是 x = {PRE}",
            title="ReLU 在残差相加之后"),
    Variant("relu_missing",
            f"分支里少了 ReLU：子层是 relu(layers[i](...))（F.relu(layer(...))）。Post-Norm 是 x = {POST}，"
            f"Pre-Norm 是 x = {PRE}",
            title="分支里少了 ReLU"),
    Variant("shared_norm",
            "各层共用了同一个 LayerNorm（例如 [nn.LayerNorm(d_model)] * num_layers 把同一个对象放进 norms "
            "多次，或只建了一个 self.norm 给所有层用）。每层要各自构造一个，放在名为 norms 的 nn.ModuleList 里："
            "nn.ModuleList([nn.LayerNorm(d_model) for _ in range(num_layers)])",
            title="各层共用一个 LayerNorm"),
    Variant("shared_linear",
            "各层共用了同一个 Linear（例如 [nn.Linear(d_model, d_model)] * num_layers 把同一个对象放进 "
            "layers 多次）。每层要各自构造一个：nn.ModuleList([nn.Linear(d_model, d_model) for _ in range(num_layers)])",
            title="各层共用一个 Linear"),
    Variant("linear_no_bias",
            "layers 里的 Linear 没有偏置（缺少 layers.i.bias，是不是写了 bias=False？）：本作业和本章的 Deep_PostNorm / "
            "Deep_PreNorm 一样用默认的 nn.Linear(d_model, d_model)，带 bias",
            title="Linear 没有 bias"),
    Variant("norm_without_bias",
            "norms 里的 Norm 没有偏置 β（缺少 norms.i.bias），像是用了 RMSNorm 或 bias=False 的 LayerNorm：本作业用 "
            "nn.LayerNorm(d_model)（减均值、除以标准差，再乘 weight、加 bias），和本章的 Deep_PostNorm / Deep_PreNorm 一样",
            title="Norm 没有 bias"),
    # --- layer_grad_norms ---------------------------------------------------------------------------------------
    Variant("reversed_order",
            "顺序反了：第 0 项应该对应 layers[0]（输入侧），最后一项对应最后一层；按 model.layers 的顺序遍历，不要 reversed",
            title="顺序反了"),
    Variant("bias_grad",
            "返回的是每层 layers[i].bias 的梯度范数：要的是 layers[i].weight.grad 的 L2 范数",
            title="用了 bias 的梯度"),
    Variant("weight_and_bias",
            "返回的是每层所有参数（weight 和 bias 合在一起）梯度的范数：只要 layers[i].weight.grad 的 L2 范数",
            title="weight 和 bias 合在一起"),
    Variant("weight_not_grad",
            "返回的是权重本身的范数 layers[i].weight.norm()，不是它的梯度：要的是 layers[i].weight.grad.norm()",
            title="权重本身的范数"),
    Variant("squared_norm",
            "返回的是范数的平方（各元素平方和）：L2 范数还要开根号，即 layers[i].weight.grad.norm()",
            title="范数的平方"),
    Variant("sum_loss",
            "loss 用的是平方误差之和（reduction=\"sum\"）：MSE loss 是对所有元素取平均，即 F.mse_loss(model(x), target) "
            "的默认写法",
            title="loss 用了求和"),
    Variant("sum_last_dim",
            "loss 对最后一维求和、再对其余维取平均：MSE loss 是对所有元素取平均，即 F.mse_loss(model(x), target)",
            title="loss 对最后一维求和"),
    Variant("no_zero_grad",
            "第二次调用的结果正好是第一次的 2 倍：旧的梯度没有清掉，.grad 在 backward 时是累加的。"
            "在 backward 之前先 model.zero_grad()",
            title="没有清掉旧的梯度"),
)
