"""The catalogue of `rmsnorm`'s mistakes (VARIANTS): names, titles and Chinese explanations, no torch.

autograder/checks/rmsnorm.py reproduces each mistake on its checks' inputs and names it when the student's value
matches (autograder.checks.match_variant); reports and summaries read the texts from here."""

from autograder.catalogue import Variant, PRECISION, catalogue

VARIANTS = catalogue(
    Variant("no_sqrt", "你算的是均方 mean(x²)，漏了开根号（有的资料把公式写成 (1/d)·Σx²，那是“均方”，不是“均方根”）；"
                       "应该是 rms = sqrt(mean(x²) + eps)，输出 x / rms · gamma", title="漏了开根号"),
    Variant("sum_not_mean", "你用的是平方和 Σx²（即除以 L2 范数 ‖x‖），而不是平方的平均 (1/d)·Σx²，结果差了 sqrt(d) 倍；"
                            "应该先求平均再开根号：rms = sqrt(mean(x²) + eps)", title="用了平方和而不是平均"),
    Variant("layernorm", "你先减去了均值，这是 LayerNorm 的做法 (x − μ) / σ；RMSNorm 不减均值，"
                         "直接用 x / sqrt(mean(x²) + eps) · gamma", title="减了均值（LayerNorm）"),
    Variant("gamma_missing", "输出没有乘 gamma；RMSNorm 的输出是 x / rms · gamma，要沿最后一维逐维乘上缩放向量 gamma", title="没有乘 gamma"),
    Variant("eps_outside_root", "eps 加在了根号外面（sqrt(mean(x²)) + eps）；本作业约定 eps 在根号里面："
                                "rms = sqrt(mean(x²) + eps)，输入很小时两者差别明显", title="eps 加在了根号外"),
    Variant("no_eps", "计算 rms 时没有加 eps；应该是 rms = sqrt(mean(x²) + eps)：eps 让全零输入不会除以 0，"
                      "输入很小时它也会改变结果", title="没有加 eps"),
    Variant("ignores_eps_argument", "没有使用传入的 eps（用了写死的常数，或者模块的 forward 没有把 self.eps 传下去）；"
                                    "rms_norm 要用参数 eps，RMSNorm 要用构造时传入的 eps", title="没有使用传入的 eps"),
    Variant("mean_over_all_elements", "平方的平均是对整个张量求的（torch.mean 没有指定 dim），不同的 token 互相影响了；"
                                      "应该只沿最后一维求：torch.mean(x * x, dim=-1, keepdim=True)，每个 token 各自归一化", title="平均没有只沿最后一维"),
    PRECISION,
    Variant("extra_beta", "模块里多了一个偏置参数（LayerNorm 的 β）；RMSNorm 只有缩放向量 gamma，没有 β", title="多了偏置参数 β"),
    Variant("gamma_renamed", "缩放向量的参数名不是 gamma（torch 的 nn.RMSNorm 和 Hugging Face 的 LlamaRMSNorm 叫它 "
                             "weight）；本作业的参数名固定为 gamma，评分时按名字加载权重，名字不对就加载不进去", title="参数名不是 gamma"),
    Variant("gamma_not_parameter", "gamma 不是模块的 nn.Parameter（写成了普通张量属性、注册成了 buffer，或者没有创建）："
                                   "这样它不在 parameters() 里，得不到梯度，也不会被训练；"
                                   "应该写 self.gamma = nn.Parameter(torch.ones(d_model))", title="gamma 不是 nn.Parameter"),
    Variant("gamma_init_not_ones", "gamma 没有初始化为全 1；应该用 torch.ones(d_model)，这样刚初始化的 RMSNorm "
                                   "只做归一化，不改变各维的尺度", title="gamma 没有初始化为全 1"),
)
